class ResultsError(Exception): pass
class LoaderKwargs(dict): pass
def loader_kwargs(**k): pass
