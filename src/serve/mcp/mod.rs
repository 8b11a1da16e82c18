//! The store as a Model Context Protocol server: `edudb mcp` over standard
//! input and output (what desktop and IDE agents launch), and `/mcp` of
//! `edudb serve` over streamable HTTP (with the server's token rules). Both
//! are [`McpServer`], the official SDK's (`rmcp`) handler over an [`Api`]:
//! a [`Db`](crate::Db) opened by the process, a [`Client`](super::Client)
//! of the server that owns the store (so an agent and a person can share
//! one), or, at a server's `/mcp`, the store the server holds.
//!
//! Tools ([`tools`]): retrieval (`search`, `query`, `list_documents`,
//! `document_tree`, `read`), memory (`remember`, `recall`,
//! `list_sessions`, `forget`) and documents (`ingest`, `remove`). Every
//! answer is text a model reads ([`text`]) beside the structured JSON the
//! CLI's `--json` gives; every failure of the store (a bad statement with
//! its line and column, a missing document, a busy store) is a tool error
//! carrying the CLI's message, never a protocol failure. Resources: each
//! document as `edudb://doc/{id}` (its tree as text) and each session as
//! `edudb://session/{id}` (its dialogue tree), with list changes announced
//! after this server's own ingests, removals and new sessions.
//!
//! Safe by default ([`McpOptions`]): read-only hides and refuses the
//! writing tools; files are ingested only from under the allowed
//! directories (none by default: text only); budgets and texts are capped.

use std::sync::Arc;

use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};

use crate::error::{Error, Result};
use crate::serve::api::Api;

mod options;
mod text;
mod tools;

use crate::serve::scheduling::ServedStore;
pub use options::McpOptions;
pub use tools::McpServer;
use tools::{Calls, refused};

/// The resource URI of a document: `edudb://doc/{id}`.
const DOC_URI: &str = "edudb://doc/";
/// The resource URI of a session: `edudb://session/{id}`.
const SESSION_URI: &str = "edudb://session/";

impl McpServer {
    /// The text of resource `uri`.
    async fn resource_text(&self, uri: &str) -> Result<String> {
        if let Some(id) = uri.strip_prefix(DOC_URI) {
            let id = id.to_owned();
            let tree = self.on_store(move |api| api.tree(&id)).await?;
            Ok(text::tree(&tree, None))
        } else if let Some(id) = uri.strip_prefix(SESSION_URI) {
            let id = id.to_owned();
            let session = self.on_store(move |api| api.session(&id)).await?;
            Ok(text::session(&session))
        } else {
            Err(Error::Usage(format!(
                "no resource {uri}: edudb's are {DOC_URI}{{id}} and {SESSION_URI}{{id}}"
            )))
        }
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_resources_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("edudb", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "edudb stores documents as exactly addressed spans (EDUs) under a structural tree, and agents' \
             sessions as dialogue trees. Use `search` to find evidence within a token budget (answers cite \
             document, EDU range, bytes and pages), `read` to follow a citation, `remember`/`recall` for \
             conversation memory.",
        )
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResponse, ErrorData> {
        if self.options.read_only && tools::WRITING.contains(&&*request.name) {
            return Ok(refused(Error::Usage(format!(
                "{} writes to the store, and this MCP server is read-only (--read-only)",
                request.name
            )))
            .into());
        }
        let call = ToolCallContext::new(self, request, context);
        self.tool_router.call(call).await
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tool_router.list_all()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tool_router.get(name).cloned()
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ListResourcesResult, ErrorData> {
        let listed = self
            .on_store(|api| Ok((api.documents(None)?, api.sessions()?)))
            .await;
        let (documents, sessions) =
            listed.map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let mut resources = Vec::new();
        for doc in documents.as_array().into_iter().flatten() {
            let id = doc["id"].as_str().unwrap_or_default();
            let mut resource = Resource::new(format!("{DOC_URI}{id}"), id)
                .with_description("the document's structural tree, with EDU spans")
                .with_mime_type("text/plain");
            if let Some(title) = doc["title"].as_str() {
                resource = resource.with_title(title);
            }
            resources.push(resource);
        }
        for session in sessions.as_array().into_iter().flatten() {
            let id = session["id"].as_str().unwrap_or_default();
            resources.push(
                Resource::new(format!("{SESSION_URI}{id}"), id)
                    .with_description("the session's dialogue tree: topics, branches and turns")
                    .with_mime_type("text/plain"),
            );
        }
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new(format!("{DOC_URI}{{id}}"), "document")
                .with_description("a document's structural tree, with EDU spans")
                .with_mime_type("text/plain"),
            ResourceTemplate::new(format!("{SESSION_URI}{{id}}"), "session")
                .with_description("a session's dialogue tree")
                .with_mime_type("text/plain"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ReadResourceResponse, ErrorData> {
        match self.resource_text(&request.uri).await {
            Ok(text) => {
                Ok(ReadResourceResult::new(vec![ResourceContents::text(text, request.uri)]).into())
            }
            Err(err) if err.is_user_error() => Err(ErrorData::resource_not_found(
                err.to_string(),
                Some(serde_json::json!({ "uri": request.uri })),
            )),
            Err(err) => Err(ErrorData::internal_error(err.to_string(), None)),
        }
    }
}

/// Serves `api` over standard input and output until the client closes
/// them.
pub fn serve_stdio(api: Arc<dyn Api + Send + Sync>, options: McpOptions) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Serve(format!("starting the runtime: {e}")))?;
    runtime.block_on(async {
        let running = McpServer::new(api, options)
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| Error::Serve(format!("starting the MCP session: {e}")))?;
        running
            .waiting()
            .await
            .map_err(|e| Error::Serve(format!("the MCP session: {e}")))?;
        Ok(())
    })
}

/// `/mcp` of a server: streamable HTTP over its `store`, stateless, each answer
/// plain JSON unless the call sends notifications first (an SSE stream
/// per call and sessions measured about 4 ms more per `remember` through
/// the official Python client). Hosts other than loopback names are
/// refused unless `open_hosts` (the server checks a bearer token then, so
/// a page in a browser cannot use it through DNS rebinding either);
/// cancelling `stop` ends the streams still open.
pub(super) fn http_service(
    store: ServedStore,
    options: McpOptions,
    open_hosts: bool,
    max_body_bytes: usize,
    stop: &tokio_util::sync::CancellationToken,
) -> StreamableHttpService<McpServer, LocalSessionManager> {
    let mut config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_cancellation_token(stop.clone())
        .with_max_request_body_bytes(max_body_bytes);
    if open_hosts {
        config = config.disable_allowed_hosts();
    }
    let server = McpServer::over(Calls::Served(store), options);
    StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}
