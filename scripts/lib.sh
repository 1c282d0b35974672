# lib.sh: what the scripts that start slide processes share. Sourced, not run.

# until_ok SECONDS WHAT CMD… retries CMD every 0.2 s for SECONDS; past them it says it timed
# out waiting for WHAT (the logs are in $work) and returns 1.
until_ok() {
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@" >/dev/null 2>&1; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "timed out waiting for $what (logs in $work)" >&2
      return 1
    fi
    sleep 0.2
  done
}
