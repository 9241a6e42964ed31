# One image for every SAM process (server, scheduler, compile and wafer workers).
FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /opt/sam
# bubblewrap: the sandbox every piece of tenant code runs in (README, "Tenant code sandbox").
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap \
    && rm -rf /var/lib/apt/lists/*
# torch first: the largest layer changes least often. Pass --build-arg TORCH_SPEC to pin a CPU build.
# Compile servers and wafer workers that run the model zoo (torchvision, timm, transformers):
#   docker build --build-arg TORCH_SPEC="torch==2.14.1 torchvision==0.29.1" \
#                --build-arg SAM_EXTRAS=postgres,zoo -t sam:zoo .
ARG TORCH_SPEC=torch==2.13.0
RUN pip install ${TORCH_SPEC}
COPY pyproject.toml README.md ./
COPY sam_server ./sam_server
COPY sam_worker ./sam_worker
COPY sam_domain ./sam_domain
COPY wse_sim ./wse_sim
COPY compiler ./compiler
COPY client ./client
# `from sam import Runner` (docs/runner.md): the repository's `sam` is a link to client/sam, which
# COPY would carry as a dangling link; the real folder goes where pyproject's packages.find looks.
# The sandbox binds the installed client/sam read-only at /sam/sam (compiler/sandbox/launcher.py).
COPY client/sam ./sam
COPY migrations ./migrations
ARG SAM_EXTRAS=postgres
RUN pip install ".[${SAM_EXTRAS}]"
RUN useradd --create-home sam && mkdir -p /data && chown sam /data
USER sam
EXPOSE 8000
CMD ["sam", "server", "--host", "0.0.0.0"]
