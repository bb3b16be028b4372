"""Shared by every test module.

Its presence matters more than its contents: pytest puts the directory of a rootdir conftest on ``sys.path`` in
every process, the pytest-xdist controller included, so helper modules here (``golden_draws``) can be imported
where the controller re-creates the warnings its workers report."""
