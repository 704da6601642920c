from grader import hookimpl

@hookimpl
def grader_configur(config):
    pass
