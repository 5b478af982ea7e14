"""A hub on loopback: the parts of the Hub's HTTP API that huggingface_hub downloads with.

Owns the repos it serves, with their commits and branches (``repos``), the HTTP server on
127.0.0.1 (``server``), the faults on the wire (``wire_faults``), the per-test ``HubRemote``
that members download from (``hub_remote``), the check that they reach loopback only
(``loopback``), and the real writer as a helper process the plugin
starts (``writer``).

May import: runtime, cache.
"""
