import sys

from arena.cli.main import main

sys.exit(main())
