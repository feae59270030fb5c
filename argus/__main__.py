import sys

from argus.cli import main

sys.exit(main())
