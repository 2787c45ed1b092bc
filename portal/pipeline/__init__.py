"""The PySpark ingestion runtime. Imports nothing from Django or Celery."""
