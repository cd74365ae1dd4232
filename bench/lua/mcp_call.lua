-- wrk script: MCP tools/call over Streamable HTTP, as a 2026-07-28 client sends it (stateless,
-- no handshake; Accept names JSON and SSE, so the server answers on an event stream).
-- Arguments (after --): TOOL QUERIES_FILE [LIMIT]
--   TOOL          the tool to call with {"query": <a line of QUERIES_FILE>}
--   QUERIES_FILE  one query a line, already JSON-escaped; each thread walks them in turn
--   LIMIT         stop each thread after this many responses (0 or absent: run for -d)
-- Checks each answer (HTTP 200, structured content, not isError) and prints one line
-- "BENCH_JSON {...}" with throughput, latency percentiles (microseconds) and error counts,
-- in the same form as send.lua.

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
local queries = {}
local headers = {}
local body_format = '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"%s",'
  .. '"arguments":{"query":"%s"},"_meta":{"io.modelcontextprotocol/protocolVersion":'
  .. '"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}'
local tool = ""

function init(args)
  tool = args[1]
  for line in io.lines(args[2]) do
    if line ~= "" then table.insert(queries, line) end
  end
  limit = tonumber(args[3] or "0") or 0
  counter = tid * 7919 -- threads start at different queries
  headers = {
    ["Content-Type"] = "application/json",
    ["Accept"] = "application/json, text/event-stream",
    ["MCP-Protocol-Version"] = "2026-07-28",
    ["Mcp-Method"] = "tools/call",
    ["Mcp-Name"] = tool,
  }
  bad = 0
  sample = ""
end

function request()
  counter = counter + 1
  local query = queries[(counter % #queries) + 1]
  return wrk.format("POST", nil, headers, string.format(body_format, counter, tool, query))
end

function response(status, hdrs, body)
  responses = responses + 1
  if status ~= 200 or not string.find(body, '"structuredContent"', 1, true)
      or string.find(body, '"isError":true', 1, true) then
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
