import sys

from neuronkit.cli import main

sys.exit(main())
