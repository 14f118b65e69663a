"""The embedded default routing table (data/routing/) says how it was derived from a measured table
in testdata/; this test runs that recipe from the file's own comments and checks that it prints
exactly the table's rows, so the recipe and the numbers cannot drift apart."""

import contextlib
import io
import os
import unittest

from cli_common import TESTDATA

REPO = os.path.dirname(TESTDATA)
TABLE = os.path.join(REPO, "data", "routing", "qwen3.5-397b-a17b.txt")


def recipe_and_rows(path):
    """The Python lines under '# Reproduce' (comment marks removed) and the table's data rows."""
    recipe, rows, in_recipe = [], [], False
    with open(path, encoding="utf-8") as table:
        for line in table.read().splitlines():
            if line.startswith("# Reproduce"):
                in_recipe = True
            elif in_recipe and line.startswith("#   "):
                recipe.append(line[len("#   "):])
            elif line.startswith("#") or not line:
                in_recipe = False
            else:
                rows.append(line)
    return "\n".join(recipe), rows


class RoutingTableSourceTest(unittest.TestCase):

    def test_the_recipe_in_the_comments_reproduces_the_rows(self):
        recipe, rows = recipe_and_rows(TABLE)
        self.assertIn("testdata/", recipe, "the recipe must read the copy in the repository")
        self.assertEqual(len(rows), 60)
        printed = io.StringIO()
        cwd = os.getcwd()
        try:
            os.chdir(REPO)
            with contextlib.redirect_stdout(printed):
                exec(compile(recipe, TABLE, "exec"), {})  # our own data file's recipe
        finally:
            os.chdir(cwd)
        self.assertEqual(printed.getvalue().splitlines(), rows)


if __name__ == "__main__":
    unittest.main()
