"""The live scheduler service: snapshot the database, call the pure policy, write its decisions
and the Celery messages in one transaction, then dispatch them (transactional outbox)."""
