"""Code the tests share. A test module imports from here (or from emunode), never from another
test module: `git grep -nE '(from|import) test_' tests/` finds nothing."""
