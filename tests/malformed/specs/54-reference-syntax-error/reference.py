def softmax(scores):
    return scores +
