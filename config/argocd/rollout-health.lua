-- Argo CD health check for stepwise.dev Rollouts.
--
-- Argo CD runs custom health scripts without Lua's string and math
-- libraries (only base, table and a trimmed os), so this script uses plain
-- comparisons and the .. operator only.
--
-- The controller writes status.phase (Healthy, Progressing, Paused,
-- Aborted), status.reason (why, one word), status.message (what it waits
-- for) and Flux-style conditions (Ready, Reconciling, Stalled).

local function condition(status, conditionType)
  if status.conditions == nil then
    return nil
  end
  for _, c in ipairs(status.conditions) do
    if c.type == conditionType then
      return c
    end
  end
  return nil
end

local function isTrue(c)
  return c ~= nil and c.status == "True"
end

-- first returns the first argument that is a non-empty string. It walks
-- the arguments with select, not ipairs, which would stop at the first nil.
local function first(...)
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    if type(v) == "string" and v ~= "" then
      return v
    end
  end
  return ""
end

local function health()
  local status = obj.status
  if status == nil then
    return "Progressing", "waiting for the rollout controller to report status"
  end

  local generation = obj.metadata.generation
  if generation ~= nil and (status.observedGeneration == nil or status.observedGeneration < generation) then
    return "Progressing", "waiting for rollout spec update to be observed"
  end

  local ready = condition(status, "Ready")
  local stalled = condition(status, "Stalled")
  local readyMessage = ready and ready.message or nil
  local stalledMessage = stalled and stalled.message or nil
  local phase = status.phase

  if phase == "Aborted" then
    return "Degraded", first(status.message, stalledMessage, readyMessage, "rollout aborted")
  end
  -- Stalled outside Aborted: only git or a person can move the Rollout on
  -- (a rollback past its progress deadline, a workload that cannot be driven).
  if isTrue(stalled) then
    return "Degraded", first(stalledMessage, status.message, "rollout stalled")
  end

  if phase == "Paused" then
    return "Suspended", first(status.message, readyMessage, "rollout paused")
  end
  if phase == "Progressing" then
    -- A step pause without a duration waits for a promote request. The
    -- controller reports that as Paused; the reason is checked as well so
    -- that a Progressing phase with that reason is not shown as moving.
    local reason = status.reason
    if reason == nil or reason == "" then
      reason = ready and ready.reason or nil
    end
    if reason == "AwaitingPromotion" then
      return "Suspended", first(status.message, readyMessage, "waiting for a promote request")
    end
    return "Progressing", first(status.message, readyMessage, "rollout in progress")
  end
  if phase == "Healthy" then
    if isTrue(ready) then
      return "Healthy", first(status.message, readyMessage)
    end
    -- Healthy phase but not Ready: the last reconcile failed (the
    -- controller retries) or the condition was not written yet.
    return "Progressing", first(readyMessage, status.message, "waiting for the Ready condition")
  end
  return "Progressing", "waiting for the rollout controller to report a phase"
end

local hs = {}
hs.status, hs.message = health()
return hs
