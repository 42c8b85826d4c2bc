"""The Spark runner's refusals."""


class SparkOperatorError(ValueError):
    """A DataFrame or operator that the Spark runner cannot run, with the column or type at fault."""
