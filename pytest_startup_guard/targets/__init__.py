"""Targets: which accelerator a runner has (cpu, cuda, rocm), and what the markers mean there.

Owns detection without torch (``detection``), the ``cpu``/``cuda``/``rocm`` marker semantics
(``markers``) and the target as a JUnit XML property (``junit``).

May import: nothing else of the plugin (the root's ``errors`` and ``checks`` only).
"""
