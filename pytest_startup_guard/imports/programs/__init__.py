"""The programs the fresh interpreters of ``imports`` run, one file each; never imported here.

``measure_import`` and ``race_imports`` are ``import_race``'s: each reads its parameters as
JSON from ``sys.argv[1]`` and prints its report, as JSON, after a marker line prefix.
``start_mode`` is the start-method checks' ``sitecustomize``: copied into a private folder put
first on ``PYTHONPATH``, it applies the mode named in the environment at interpreter start.
Standard library only: they run in the interpreter under test, which may lack this package.
"""
