-- Argo CD health check for stepwise.dev CloneSets.
--
-- Argo CD runs custom health scripts without Lua's string and math
-- libraries (only base, table and a trimmed os), so this script uses plain
-- comparisons and the .. operator only.
--
-- The controller writes replica counts and Flux-style conditions (Ready,
-- Reconciling, Stalled). A CloneSet held by the Rollout that governs it is
-- Healthy here: its Pods are where the Rollout's grant puts them (the
-- counts follow the grant, not spec.updateStrategy.partition, which is
-- ignored meanwhile), and the Rollout carries the progress of the release.
-- A new revision the Rollout has not acknowledged yet keeps the CloneSet
-- Reconciling (reason AwaitingRollout), so Progressing: an app never reads
-- Healthy between a commit and the Rollout's reaction to it.

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

-- count reads an optional integer field; the API server omits zeros.
local function count(v)
  if v == nil then
    return 0
  end
  return v
end

local function messageOf(c, fallback)
  if c ~= nil and c.message ~= nil and c.message ~= "" then
    return c.message
  end
  return fallback
end

local function health()
  local status = obj.status
  if status == nil then
    return "Progressing", "waiting for the CloneSet controller to report status"
  end

  local generation = obj.metadata.generation
  if generation ~= nil and (status.observedGeneration == nil or status.observedGeneration < generation) then
    return "Progressing", "waiting for CloneSet spec update to be observed"
  end

  local stalled = condition(status, "Stalled")
  if isTrue(stalled) then
    return "Degraded", messageOf(stalled, "CloneSet stalled")
  end
  local reconciling = condition(status, "Reconciling")
  if isTrue(reconciling) then
    return "Progressing", messageOf(reconciling, "CloneSet reconciling")
  end

  local spec = obj.spec or {}
  -- spec.replicas defaults to 1 in the CRD schema.
  local desired = spec.replicas
  if desired == nil then
    desired = 1
  end
  local updated = count(status.updatedReplicas)
  local expected = count(status.expectedUpdatedReplicas)
  local updatedReady = count(status.updatedReadyReplicas)
  local ready = count(status.readyReplicas)

  local strategy = spec.updateStrategy or {}
  if strategy.paused == true and updated < expected then
    return "Suspended", "update paused: " .. updated .. " of " .. expected .. " Pods updated"
  end

  if ready == desired and updatedReady >= expected then
    return "Healthy", messageOf(condition(status, "Ready"), ready .. "/" .. desired .. " Pods ready")
  end
  return "Progressing", ready .. "/" .. desired .. " Pods ready, " .. updatedReady .. " of " .. expected .. " updated Pods ready"
end

local hs = {}
hs.status, hs.message = health()
return hs
