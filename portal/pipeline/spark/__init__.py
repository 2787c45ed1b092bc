"""The pipeline's Spark: the SparkSession with Flowport's settings (`session`), the Python
workers forked warm from this checkout (`pydaemon`), the JVM gateway the driver's Python talks
through (`gateway`) and the class loading of the JDBC drivers and the pipeline's own jar
(`classloading`)."""
