import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # so the example imports as a plain module, as in the guide
