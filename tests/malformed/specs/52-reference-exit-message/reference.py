import sys

sys.exit('no numpy here')
