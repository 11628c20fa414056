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
RUN pip install .
COPY migrations ./migrations

# `partner-repo migrate` finds ./migrations from here.
RUN useradd --create-home --uid 10001 partner
USER partner

ENTRYPOINT ["partner-repo"]
CMD ["--help"]
