-- wrk script: streamed 200-token completions with ignore_eos, as the paper's workload.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"model":"heisenbench-mock","prompt":"' .. string.rep("word ", 320) .. '","max_tokens":200,"stream":true,"ignore_eos":true}'
