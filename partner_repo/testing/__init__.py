"""Testing a service that uses partner-repo: a pytest plugin and a throwaway test server.

- :mod:`partner_repo.testing.plugin`, loaded by pytest on its own wherever partner-repo is installed (the
  ``pytest11`` entry point): the fixture ``partner_repo_database``, a fresh, initialized in-memory database
  for each test, closed after it. Its fixtures all start with ``partner_repo_``, so none can clash with an
  application's own.
- :mod:`partner_repo.testing.server`: ``python -m partner_repo.testing.server [command]`` runs a command (by
  default ``pytest -m integration``) with ``MONGODB_URI`` naming a MongoDB-compatible server started on
  loopback for it (SecantusDB, in a virtual environment of its own: never imported, never a dependency).

Nothing here is imported by the rest of the library.
"""
