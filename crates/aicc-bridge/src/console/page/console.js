// The operator's console page: state and entries come from /events (server
// push); actions are POSTs carrying the console's header. Everything shown
// is put in as text, never as HTML.
"use strict";

const MAX_ENTRIES = 300;
const $ = (id) => document.getElementById(id);
let shownCamera = null;
let shownAgentFrame = null;
let shownApprovals = "";

function text(value) {
  return typeof value === "string" ? value : JSON.stringify(value);
}

function cell(row, content, className) {
  const td = row.insertCell();
  if (content instanceof Node) td.appendChild(content); else td.textContent = text(content);
  if (className) td.className = className;
  return td;
}

async function act(path, body) {
  const result = $("action-result");
  try {
    const response = await fetch(path, {
      method: "POST",
      headers: { "X-AICC-Console": "1", "Content-Type": "application/json" },
      body: JSON.stringify(body || {}),
    });
    const answer = await response.json();
    result.textContent = answer.ok ? `${path}: done` : `${path}: refused: ${answer.error && answer.error.message}`;
    result.dataset.status = String(response.status);
    return answer;
  } catch (error) {
    result.textContent = `${path}: ${error}`;
    return null;
  }
}

function renderApprovals(pending) {
  const key = pending.map((p) => p.approval_id).join(",");
  const body = $("approvals").tBodies[0];
  // Rows are rebuilt only when the set changes, so a click is never lost to a redraw.
  if (key !== shownApprovals) {
    shownApprovals = key;
    body.replaceChildren();
    for (const p of pending) {
      const row = body.insertRow();
      row.dataset.approvalId = p.approval_id;
      row.dataset.tool = p.tool;
      cell(row, p.tool);
      const input = document.createElement("code");
      input.textContent = JSON.stringify(p.input);
      cell(row, input);
      cell(row, p.reason);
      cell(row, p.session);
      cell(row, "", "left");
      const buttons = document.createElement("span");
      for (const [label, path] of [["Approve", "/api/approve"], ["Deny", "/api/deny"]]) {
        const button = document.createElement("button");
        button.textContent = label;
        button.className = label.toLowerCase();
        button.addEventListener("click", () => act(path, path === "/api/deny" ? { approval_id: p.approval_id, reason: "denied on the console" } : { approval_id: p.approval_id }));
        buttons.appendChild(button);
      }
      cell(row, buttons);
    }
  }
  for (const row of body.rows) {
    const p = pending.find((q) => q.approval_id === row.dataset.approvalId);
    if (p) row.querySelector(".left").textContent = `${p.expires_in_s.toFixed(0)} s`;
  }
}

function render(state) {
  const odom = state.odometry;
  $("pose").textContent = odom
    ? `x ${odom.x_m.toFixed(3)} m, y ${odom.y_m.toFixed(3)} m, yaw ${(odom.yaw_rad * 180 / Math.PI).toFixed(1)}° (${odom.frame_id}); ` +
      `${odom.linear_mps.toFixed(3)} m/s, ${odom.angular_radps.toFixed(3)} rad/s; ${(odom.age_s * 1000).toFixed(0)} ms old`
    : `no odometry yet on ${state.odometry_topic}`;
  const restrictions = $("restrictions");
  restrictions.replaceChildren();
  for (const r of state.restrictions) {
    const li = document.createElement("li");
    li.textContent = `${r.rule}: ${r.reason}`;
    restrictions.appendChild(li);
  }
  if (!state.restrictions.length) restrictions.appendChild(Object.assign(document.createElement("li"), { textContent: "no restriction" }));
  $("lease").textContent = `lease: ${state.lease_holder || "nobody"}`;
  const sessions = $("sessions");
  sessions.replaceChildren();
  for (const s of state.sessions || []) {
    const li = document.createElement("li");
    li.textContent = `${s.id} (${s.scope}${s.attached ? "" : ", detached"}), ${s.calls_in_flight} call(s) in flight${s.agent_model ? ", " + s.agent_model : ""}`;
    sessions.appendChild(li);
  }
  $("approval-mode").textContent = state.approval_mode ? "(approval mode on: every actuator call waits)" : "";
  renderApprovals(state.approvals || []);
  $("held").hidden = !state.held;
  $("release").hidden = !state.held;
  document.body.dataset.held = String(state.held);
  if (state.camera && state.camera.seq !== shownCamera) {
    shownCamera = state.camera.seq;
    $("camera").src = `/camera.jpg?seq=${shownCamera}`;
    $("camera").dataset.seq = String(shownCamera);
    $("camera-info").textContent = `(frame ${shownCamera}, stamp ${state.camera.stamp_s.toFixed(2)} s)`;
  }
  if (state.agent_frame && state.agent_frame.seq !== shownAgentFrame) {
    shownAgentFrame = state.agent_frame.seq;
    $("agent-frame").src = `/agent-frame?seq=${shownAgentFrame}`;
    $("agent-frame").dataset.seq = String(shownAgentFrame);
    $("agent-frame-info").textContent = `(${state.agent_frame.tool}, call ${state.agent_frame.call_id})`;
  }
}

function describe(entry) {
  const who = entry.session ? `[${entry.session}] ` : entry.conn ? `[conn ${entry.conn}] ` : "";
  switch (entry.kind) {
    case "call": return `${who}→ ${entry.tool} ${text(entry.input)} (${entry.call_id})`;
    case "result": return `${who}← ${entry.tool} ${entry.ok ? "ok " + text(entry.output) : "FAILED " + text(entry.error)} (${entry.call_id})`;
    case "event": return `event ${entry.topic}: ${text(entry.payload)}`;
    case "command": return `${who}command ${text(entry.payload)}`;
    case "approval": return `approval ${text(entry.payload)}`;
    case "connected": return `${who}connected from ${entry.peer}`;
    case "disconnected": return `${who}disconnected`;
    case "session": return `${who}session ${entry.session_id} opened`;
    case "lease_released": return "motion lease released: base told to stop";
    case "lost": return `(this page fell behind: ${entry.records || entry.updates} update(s) not shown)`;
    case "bad_line": return `${who}sent a line that is not JSON: ${entry.text}`;
    case "error": return `${who}error ${entry.code}: ${entry.message}`;
    default: return `${entry.kind} ${text(entry)}`;
  }
}

function addEntry(entry) {
  const li = document.createElement("li");
  li.className = entry.kind + (entry.ok === false ? " failed" : "");
  li.dataset.kind = entry.kind;
  if (entry.tool) li.dataset.tool = entry.tool;
  const at = entry.at_ms ? new Date(entry.at_ms).toISOString().slice(11, 23) + " " : "";
  li.textContent = at + describe(entry);
  const stream = $("stream");
  stream.prepend(li);
  while (stream.children.length > MAX_ENTRIES) stream.lastChild.remove();
}

function connect() {
  const events = new EventSource("/events");
  events.addEventListener("open", () => { $("link").textContent = "live"; $("link").className = "link up"; });
  events.addEventListener("error", () => { $("link").textContent = "connection lost: retrying"; $("link").className = "link down"; });
  events.addEventListener("state", (e) => render(JSON.parse(e.data)));
  events.addEventListener("entry", (e) => addEntry(JSON.parse(e.data)));
}

$("stop").addEventListener("click", () => act("/api/stop"));
$("release").addEventListener("click", () => act("/api/release"));
connect();
