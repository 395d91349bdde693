#!/usr/bin/env bash
# Install an MLflow tracking server into its own virtual environment, for the export test (tests marked `mlflow`).
# The server is a separate program: its dependencies (Flask, alembic, pandas, pyarrow pins) stay out of the
# project's .venv, and the export itself talks to the server's REST API with requests (no mlflow package needed).
# Idempotent. The tests find the server through $MOE_SWEEP_MLFLOW (the `mlflow` program), else this folder.
set -euo pipefail
DIR="${MOE_SWEEP_MLFLOW_VENV:-$HOME/.cache/moe_sweep/mlflow-venv}"
VERSION="${MOE_SWEEP_MLFLOW_VERSION:-3.17.2}"
PY="${PYTHON:-python3}"
if [ -x "$DIR/bin/mlflow" ] && "$DIR/bin/python" -c "import mlflow, sys; sys.exit(mlflow.__version__ != '$VERSION')"; then
  echo "mlflow $VERSION already installed: $DIR/bin/mlflow"; exit 0
fi
"$PY" -m venv "$DIR"
"$DIR/bin/pip" install -q --upgrade pip
"$DIR/bin/pip" install -q "mlflow==$VERSION"
echo "mlflow installed: $DIR/bin/mlflow ($("$DIR/bin/mlflow" --version))"
