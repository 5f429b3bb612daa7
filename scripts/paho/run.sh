#!/bin/bash
# The Eclipse Paho MQTT interoperability suite against this checkout's daemon (docs/testing.md
# "Interoperability: the Eclipse Paho suite"). The suite is not ours and is never committed:
#
#   git clone https://github.com/eclipse/paho.mqtt.testing /tmp/paho.mqtt.testing
#   npm run build && scripts/paho/run.sh /tmp/paho.mqtt.testing/interoperability
#
# It starts the daemon on a temp data directory and port 0 (the ports are read from its `ready`
# line), creates the user `paho` (the suite connects anonymously: sitecustomize.py gives its
# clients the credentials and the port), and runs each test alone, as a separate process, so that
# one test's leftovers cannot fail the next. SUITES picks the files (default both); the MQTT 3.1.1
# file's will test is not named test*, so it is named here. Logs: $PAHO_LOGS (default a temp dir).
# PAHO_BROKER=mosquitto runs the same against Debian's Mosquitto instead; PAHO_GATEWAYD_ENV adds
# settings to the daemon's environment (e.g. GATEWAYD_SET__STORAGE__HOLDMS=1000).
set -u
SUITE_DIR=$(cd "${1:?usage: scripts/paho/run.sh <paho.mqtt.testing/interoperability>}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
CHECKOUT=$(cd "$HERE/../.." && pwd)
DATA=$(mktemp -d /tmp/paho-gatewayd-XXXX)
LOGS=${PAHO_LOGS:-$(mktemp -d /tmp/paho-logs-XXXX)}
ADMIN_PASSWORD='Adm1n-Passw0rd!'
PAHO_PASSWORD='Paho-Passw0rd1'

if [ "${PAHO_BROKER:-gatewayd}" = mosquitto ]; then
  # The comparison: Debian's Mosquitto 2 on a free loopback port, anonymous (the suite's own setting).
  MQTT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  printf 'listener %s 127.0.0.1\nallow_anonymous true\npersistence false\n' "$MQTT" > "$DATA/mosquitto.conf"
  mosquitto -c "$DATA/mosquitto.conf" > "$DATA/mosquitto.log" 2>&1 &
  PID=$!
  trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$DATA"' EXIT
  for _ in $(seq 1 100); do mosquitto_pub -h 127.0.0.1 -p "$MQTT" -t warm/up -m 1 2>/dev/null && break; sleep 0.1; done
  PAHO_USER=""
else
  GATEWAYD_DATA_DIR=$DATA GATEWAYD_HOST=127.0.0.1 GATEWAYD_HTTP_PORT=0 GATEWAYD_HTTPS_PORT=0 \
    GATEWAYD_MQTT_PORT=0 GATEWAYD_MQTTS_PORT=0 GATEWAYD_ADMIN_PASSWORD=$ADMIN_PASSWORD \
    GATEWAYD_SET__MQTT__MAXKEEPALIVESECONDS=60 \
    env ${PAHO_GATEWAYD_ENV:-} node "$CHECKOUT/dist/src/main.js" > "$DATA/daemon.log" 2>&1 &
  PID=$!
  trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$DATA"' EXIT
  READY=""
  for _ in $(seq 1 300); do
    READY=$(grep -m1 '"message":"ready"' "$DATA/daemon.log" || true)
    [ -n "$READY" ] && break
    kill -0 $PID 2>/dev/null || { cat "$DATA/daemon.log"; exit 1; }
    sleep 0.1
  done
  [ -n "$READY" ] || { echo "the daemon did not get ready"; exit 1; }
  port() { node -e 'const r = JSON.parse(process.argv[1]); console.log(r[process.argv[2]])' "$READY" "$1"; }
  HTTP=$(port http); MQTT=$(port mqtt)
  TOKEN=$(curl -sf -X POST "http://127.0.0.1:$HTTP/api/login" -H 'content-type: application/json' \
    -d "{\"username\":\"admin\",\"password\":\"$ADMIN_PASSWORD\"}" | node -pe 'JSON.parse(require("fs").readFileSync(0)).token')
  curl -sf -X POST "http://127.0.0.1:$HTTP/api/users" -H "authorization: Bearer $TOKEN" -H 'content-type: application/json' \
    -d "{\"username\":\"paho\",\"password\":\"$PAHO_PASSWORD\",\"identityProvider\":\"local\",\"initialPermissions\":[{\"context\":\"mqtt\",\"resource\":\"#\",\"operation\":\"readWrite\"},{\"context\":\"mqtt\",\"resource\":\"\$TopicA/#\",\"operation\":\"readWrite\"}]}" \
    > /dev/null || { echo "the user paho was not created"; exit 1; }
  # The first password check of a started daemon derives its key (scrypt); the suite's clients wait 0.5 s.
  mosquitto_pub -h 127.0.0.1 -p "$MQTT" -u paho -P "$PAHO_PASSWORD" -t warm/up -m 1
  PAHO_USER=paho
fi

cd "$SUITE_DIR"
export PYTHONPATH=$HERE:$SUITE_DIR PAHO_USERNAME=$PAHO_USER PAHO_PASSWORD=$PAHO_PASSWORD PAHO_PORT=$MQTT
for suite in ${SUITES:-client_test.py client_test5.py}; do
  pass=0; fail=0; failed=""
  tests=$(grep -o "def test[A-Za-z0-9_]*" "$suite" | sed 's/def //')
  [ "$suite" = client_test.py ] && tests="$tests will_message_test"
  for t in $tests; do
    if timeout 120 python3 "$suite" "Test.$t" > "$LOGS/$suite.$t.log" 2>&1; then pass=$((pass + 1)); else fail=$((fail + 1)); failed="$failed $t"; fi
  done
  echo "$suite: $pass passed, $fail failed:$failed"
done
echo "logs: $LOGS"
