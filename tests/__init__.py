"""The test suite, a package: every test module is imported by its full path, never by its bare name.

So two folders may hold test files of the same name (``tests/unit/listener/test_lease.py`` beside
``tests/unit/cores/test_lease.py``), every folder may have a ``conftest.py`` of its own, and a helper is
imported from where it lives (``from tests.conftest import until``), the same module whichever test asked.
"""
