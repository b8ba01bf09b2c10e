import sys

from archdsl.cli import main

sys.exit(main())
