"""The fake Hugging Face hub cache: the real on-disk layout, its env, corruptions and copies.

Owns ``FakeHubCache`` and ``CachedRepo`` (``hubcache``), the layout helpers as huggingface_hub
writes them (``layout``), pointing the test process at a cache and back (``env``), the
persistent corruptions (``corruptions``), the corruptions of a plain file such as a
compile-cache entry (``file_corruptions``) and reading real repos, a model folder or a real hub
cache, as sources of fake ones (``sources``).

May import: runtime.
"""
