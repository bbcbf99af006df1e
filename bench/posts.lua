-- Inbox posts for wrk, as bench/native_load.py runs it:
--   wrk -t N -c N -s bench/posts.lua URL -- RUN PATH [PATH ...]
-- Each wrk thread keeps one connection and posts to one path (the paths in turn,
-- reused when fewer than the threads), each post with an Idempotency-Key of its
-- own (RUN, the thread's number and a count), so each is a new event.
local threads = {}

function setup(thread)
  table.insert(threads, thread)
  thread:set("number", #threads)
end

function init(args)
  run = args[1]
  path = args[2 + (number - 1) % (#args - 1)]
  sent = 0
  body = '{"type":"bench.tick","source":"bench","data":{"n":' .. number .. '}}'
end

function request()
  sent = sent + 1
  local headers = {
    ["Content-Type"] = "application/json",
    ["Idempotency-Key"] = run .. ":" .. number .. ":" .. sent,
  }
  return wrk.format("POST", path, headers, body)
end

-- One JSON line for bench/native_load.py; times in microseconds.
function done(summary, latency, requests)
  local errors = summary.errors
  io.write(string.format(
    '{"requests": %d, "microseconds": %d, "refused": %d, "socket_errors": %d, "p50_us": %d, "p99_us": %d}\n',
    summary.requests, summary.duration, errors.status,
    errors.connect + errors.read + errors.write + errors.timeout,
    latency:percentile(50), latency:percentile(99)))
end
