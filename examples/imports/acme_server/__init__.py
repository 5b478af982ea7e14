"""A small API server's start-up code: the bad patterns of incident 2 next to the good ones.

``bad_*`` modules are what not to write (the checks in ``../test_*.py`` catch them); ``good_*``
modules are the fixes. ``lazy_swap_lib`` stands for ``transformers`` (a slow import that swaps
``sys.modules``), ``plain_lib`` for a library that does not swap.
"""
