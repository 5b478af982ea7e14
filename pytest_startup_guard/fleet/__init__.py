"""The server fleet: N real processes behind one start barrier, watched one by one.

Owns one launch as asked, checked once (``spec``: ``LaunchSpec`` and the keywords each entry
point takes), what each member runs (``plan``), starting a fleet (``launcher``) and watching it
come up (``watcher``), what a launch returns (``fleet``: ``Fleet``; ``server``: ``Server``, one
member) and every worker process under a member, each judged on its own fate (``workers``);
``ServerFleet``, the fixture (``server_fleet``); the readiness probes (``ready``), reading
members' output in bounded memory (``output``); leased loopback ports (``ports``); the reaper
that outlives a dying pytest (``reaper``); the layered pytest-timeout marks (``timeouts``);
waking the moment a member exits (``exit_wait``) and CPU load beside a test (``load``). Whole
process trees are ended by ``runtime.process_group``. Two wings: members forked from a warm
template (``warm/``) and exploring a start-up's access points and the real writer's steps
(``explore/``). The faults a launch takes are the ``faults`` part's. The programs it runs as
processes of their own are files in ``programs/``.

May import: runtime, cache, remote, races, faults.
"""
