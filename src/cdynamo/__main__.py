"""``python -m cdynamo script.py [args...]``: run a script with cdynamo installed
(torch.compile goes to cdynamo; see cdynamo.install)."""
import sys

from cdynamo._install import main

sys.exit(main())
