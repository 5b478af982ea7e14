"""Warm members: fleet members forked from a template that imported their stack once.

Owns the session's templates, the probe that finds a command's imports and what can be forked
(``templates``), the template process itself, run as
``python -m pytest_startup_guard.fleet.warm.template`` (``template``), what its imports read
(``observe``) and whether a fork of it starts as a cold start would, or why not
(``equivalence``), and a forked member as the fleet sees it, in place of a ``Popen``
(``forked``).
"""
