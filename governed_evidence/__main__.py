import sys

from governed_evidence.cli import main

sys.exit(main())
