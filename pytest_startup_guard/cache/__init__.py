"""The fake Hugging Face hub cache: the real on-disk layout, its env, corruptions and copies.

Owns ``FakeHubCache`` and ``CachedRepo`` (``hubcache``), the layout helpers as huggingface_hub
writes them (``layout``), pointing the test process at a cache and back (``env``) and the
persistent corruptions (``corruptions``).

May import: runtime.
"""
