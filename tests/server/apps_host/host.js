// The host page of the view's browser tests, built on the MCP Apps SDK's own host side
// (AppBridge + PostMessageTransport from @modelcontextprotocol/ext-apps), as the SDK's
// basic-host example does: the view runs in an inner frame of a sandbox proxy page served
// from a second origin, under the CSP the test serves with that page.
//
// window.startHost({sandboxUrl, hostContext, serverResources}) loads the proxy, hands it the
// view's HTML and connects the bridge; resources/read goes to window.mcpReadResource (a real
// MCP client's, bound by the test). Every message the view sends is kept in window.hostLog.
import { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";

window.hostLog = [];

window.startHost = async ({ sandboxUrl, html, hostContext, serverResources }) => {
  const frame = document.getElementById("app");
  window.addEventListener("message", (event) => {
    const data = event.data;
    if (event.source === frame.contentWindow && data?.jsonrpc === "2.0" && !data.method?.startsWith("ui/notifications/sandbox-")) {
      window.hostLog.push(data);
    }
  });
  const proxyReady = new Promise((resolve) => {
    const listener = (event) => {
      if (event.source === frame.contentWindow && event.data?.method === "ui/notifications/sandbox-proxy-ready") {
        window.removeEventListener("message", listener);
        resolve();
      }
    };
    window.addEventListener("message", listener);
  });
  frame.src = sandboxUrl;
  await proxyReady;

  const capabilities = { openLinks: {}, serverTools: {} };
  if (serverResources) capabilities.serverResources = {};
  const bridge = new AppBridge(null, { name: "mcp-analysis test host", version: "1" }, capabilities, {
    hostContext,
  });
  if (serverResources) {
    bridge.onreadresource = async (params) => window.mcpReadResource(params.uri);
  }
  bridge.onsizechange = ({ height }) => {
    if (height !== undefined) frame.style.height = height + "px";
  };
  bridge.onrequestdisplaymode = async ({ mode }) => {
    const offered = hostContext.availableDisplayModes || ["inline"];
    const granted = offered.includes(mode) ? mode : hostContext.displayMode || "inline";
    if (granted === "fullscreen") frame.classList.add("fullscreen");
    else frame.classList.remove("fullscreen");
    hostContext = { ...hostContext, displayMode: granted };
    bridge.setHostContext(hostContext);
    return { mode: granted };
  };
  const initialized = new Promise((resolve) => { bridge.oninitialized = () => resolve(); });
  await bridge.connect(new PostMessageTransport(frame.contentWindow, frame.contentWindow));
  await bridge.sendSandboxResourceReady({ html });
  await initialized;
  window.bridge = bridge;
};
