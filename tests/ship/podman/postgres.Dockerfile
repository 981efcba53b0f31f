# A stand-in for the image compose.scale.yaml names (postgres:15-bookworm) on a
# machine that reaches Debian's mirrors but not Docker Hub: Debian 12's own
# PostgreSQL 15, started the way the official image starts it (POSTGRES_USER,
# POSTGRES_PASSWORD, POSTGRES_DB; data in /var/lib/postgresql/data;
# pg_isready for the health check). Built by tests/ship/podman_compose_test.sh
# only when no postgres:15-bookworm image is there.
FROM debian:12-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql-15 \
 && rm -rf /var/lib/apt/lists/*
COPY tests/ship/podman/postgres-entry.sh /usr/local/bin/postgres-entry
ENV PATH=/usr/lib/postgresql/15/bin:$PATH
EXPOSE 5432
CMD ["postgres-entry"]
