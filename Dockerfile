# The partner-repo CLI as a small image, for the long-running processes of a deployment (see docker-compose.yml):
#   docker build -t partner-repo .   then   docker run --rm partner-repo --help
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

COPY pyproject.toml README.md ./
COPY partner_repo ./partner_repo
COPY migrations ./migrations
# The migrations are installed with the package: `partner-repo migrate` finds them from any directory.
# The metrics extra (prometheus_client, pure Python) lets `listen --metrics-port` serve /metrics.
RUN pip install ".[metrics]"

RUN useradd --create-home --uid 10001 partner
USER partner

ENTRYPOINT ["partner-repo"]
CMD ["--help"]
