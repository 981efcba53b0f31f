error({code = 42})
