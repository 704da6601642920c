import sys

def softmax(scores, allowed=None):
    sys.exit(3)
