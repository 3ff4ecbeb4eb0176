-- fenced_script / step_in_script: the application's own script, run only while
-- the lease is held (RFC 002 fencing: the check and the write will be atomic). The caller's
-- body is the function __fenced_body, defined after this file's two functions have run the
-- fence (text after the check, so a body that closes its wrapper with
-- `end ...` still runs nothing before the check), and outside the function holding every
-- helper, so it sees none of them; it is called with its own keys and arguments only.
-- This file is the inside of that function: it returns the check (`pre`) and what follows
-- the body (`finish`).
-- KEYS[1] the namespace prefix, then (the admitting variants) KEYS[2] its anchor, then the
-- caller's keys (checked by the client: each carries the namespace's hash tag and lies
-- outside the prefix).
-- ARGV[3] id, ARGV[4] token, ARGV[5] step field ('' = no step record: fenced_script),
-- ARGV[6] the record's value before its response ('<token>|1|'), ARGV[7] the largest
-- response in bytes; then (the admitting variants, fenced_script_admitting and
-- step_in_script_admitting) ARGV[8] the wake publish command, ARGV[9] the number n of
-- admissions, ARGV[10] their admission sequences and seven arguments per admission, as
-- admit_batch takes them; then the caller's arguments.
-- Reply: {'ok', result} (fenced_script) | {'new', response} | {'existing', value}
--   (step_in_script) | {'failed', message} (the body raised an error) |
--   {'bad_response', why} | {'lost'} | {'unknown'} | {'zero'} | {'foreign'}. The admitting
--   variants answer {'ok', admitted, result} and {'new', admitted, response}, `admitted`
--   being admit_batch's reply, placed before `result` because a nil result ends the reply.
-- Order: the fence, then (for a step) the record's absence, both before the body runs, so
-- a refused call runs none of it; the admissions only after the body returned without
-- error (and, for a step, its response passed the checks), and the step record after the
-- admissions, so a step is never recorded without the children it admits.
-- The fence and, for a step, the record's absence: a reply when the body must not run,
-- else nil and the body's keys (KEYS[first_key..]) and arguments (ARGV[first_arg..]).
function H.pre(first_key, first_arg)
  local id, field = ARGV[3], ARGV[5]
  local held = H.fence(id, ARGV[4])
  if held ~= 'held' then return {held} end
  if field ~= '' then
    -- Also the type check of the steps key: a foreign type fails here, before the body.
    local existing = redis.call('HGET', H.k_steps(id), field)
    if existing then return {'existing', existing} end
  end

  local keys, argv = {}, {}
  for i = first_key, #KEYS do keys[i - first_key + 1] = KEYS[i] end
  for i = first_arg, #ARGV do argv[i - first_arg + 1] = ARGV[i] end
  return nil, keys, argv
end

-- The admitting variants' admissions (`admit`, nil for the plain scripts), made with
-- replication back on (the body could have switched it off): admit_batch's reply, or nil.
function H.admitted(admit)
  if not admit then return nil end
  redis.set_repl(redis.REPL_ALL)
  return admit()
end

-- The reply of a call that went through, with the admissions' reply (if any) after the
-- status word.
function H.went_through(status, result, admissions)
  if admissions then return {status, admissions, result} end
  return {status, result}
end

-- What follows the body: its result checked, then the admissions (`admit`, nil for the
-- plain scripts) and, for a step, the record.
function H.finish(ok, result, admit)
  local id, field = ARGV[3], ARGV[5]
  -- A raised error, or an error reply the body returned (redis.error_reply): either way the
  -- writes the body made before it stay (a Lua error does not roll back).
  if not ok or (type(result) == 'table' and result.err) then
    if type(result) == 'table' and result.err then result = result.err end
    return {'failed', tostring(result)}
  end
  if field == '' then return H.went_through('ok', result, H.admitted(admit)) end

  -- The step's response: JSON text the client can store (checked before the record exists).
  if type(result) ~= 'string' then
    return {'bad_response', 'the body returned a ' .. type(result) .. ', not JSON text'}
  end
  if #result > tonumber(ARGV[7]) then
    return {'bad_response', 'the response is ' .. #result .. ' bytes, over ' .. ARGV[7]}
  end
  local parsed, doc = pcall(cjson.decode, result)
  if not parsed then return {'bad_response', 'the response is not JSON: ' .. tostring(doc)} end
  local function depth(v, d)
    if type(v) ~= 'table' then return d end
    local deepest = d + 1
    for _, x in pairs(v) do deepest = math.max(deepest, depth(x, d + 1)) end
    return deepest
  end
  if depth(doc, 0) > __MAX_JSON_DEPTH__ then
    return {'bad_response', 'the response nests deeper than __MAX_JSON_DEPTH__'}
  end
  local admissions = H.admitted(admit)
  -- The body could have switched replication off; the record must reach the replicas.
  redis.set_repl(redis.REPL_ALL)
  H.insert_step(id, field, ARGV[6] .. result)
  return H.went_through('new', result, admissions)
end

return H.pre, H.finish
