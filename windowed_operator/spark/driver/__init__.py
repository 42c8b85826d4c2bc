"""The Spark runner's driver side: what ``apply()`` reads, decides and wires into a streaming query.

Nothing here runs on the executors: ``inputs`` (columns, event time, watermark, end of input),
``stage`` (one ``transformWithStateInPandas`` stage and its shown panes), ``feed`` (what a stage
hands the next one of its chain).
"""
