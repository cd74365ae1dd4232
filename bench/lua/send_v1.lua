-- wrk script: A2A 1.0 SendMessage over JSON-RPC (A2A-Version: 1.0), a unique messageId per
-- request; the call waits for the task's end (returnImmediately is false by default).
-- Arguments (after --): RUN_TOKEN [LIMIT]
--   RUN_TOKEN  unique per wrk run, so messageIds never repeat across runs
--   LIMIT      stop each thread after this many responses (0 or absent: run for -d)
-- Checks each answer (HTTP 200 and a task in TASK_STATE_COMPLETED) and prints one line
-- "BENCH_JSON {...}" with throughput, latency percentiles (microseconds) and error counts.

local threads = {}
local next_tid = 0

function setup(thread)
  next_tid = next_tid + 1
  thread:set("tid", next_tid)
  table.insert(threads, thread)
end

local counter = 0
local responses = 0
local limit = 0
local prefix = ""
local headers = { ["Content-Type"] = "application/json", ["A2A-Version"] = "1.0" }
local body_format = '{"jsonrpc":"2.0","id":%d,"method":"SendMessage","params":{"message":'
  .. '{"role":"ROLE_USER","parts":[{"text":"bench %s-%d"}],"messageId":"%s-%d"},'
  .. '"configuration":{"acceptedOutputModes":["text/plain"]}}}'

function init(args)
  prefix = string.format("%s-%d", args[1] or "run", tid)
  limit = tonumber(args[2] or "0") or 0
  bad = 0
  sample = ""
end

function request()
  counter = counter + 1
  local body = string.format(body_format, counter, prefix, counter, prefix, counter)
  return wrk.format("POST", nil, headers, body)
end

function response(status, hdrs, body)
  responses = responses + 1
  if status ~= 200 or not string.find(body, '"state"%s*:%s*"TASK_STATE_COMPLETED"') then
    bad = bad + 1
    if sample == "" then sample = string.sub(tostring(status) .. " " .. body, 1, 300) end
  end
  if limit > 0 and responses == limit then
    io.write("BENCH_LIMIT_REACHED\n")
    io.flush()
    wrk.thread:stop()
  end
end

local function escape(s)
  return (string.gsub(s, '[%c"\\]', function(c) return string.format("\\u%04x", string.byte(c)) end))
end

function done(summary, latency, requests)
  local bad_total = 0
  local sample_any = ""
  for _, thread in ipairs(threads) do
    bad_total = bad_total + (thread:get("bad") or 0)
    local s = thread:get("sample") or ""
    if sample_any == "" then sample_any = s end
  end
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests":%d,"duration_us":%d,"bytes":%d,'
      .. '"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,"mean_us":%.1f,'
      .. '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,"bad_body":%d},'
      .. '"bad_sample":"%s"}\n',
    summary.requests, summary.duration, summary.bytes,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    latency.mean,
    e.connect, e.read, e.write, e.status, e.timeout, bad_total, escape(sample_any)))
end
