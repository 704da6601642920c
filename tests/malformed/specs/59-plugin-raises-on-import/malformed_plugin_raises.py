
raise RuntimeError('no GPU')
