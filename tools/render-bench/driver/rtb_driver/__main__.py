"""`python3 -m rtb_driver`: the package run as the shipped one-file driver runs."""

import sys

from .main import main

sys.exit(main())
