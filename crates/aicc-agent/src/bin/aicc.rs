//! `aicc`: a command-line AICC agent for the bridge (see docs/cli.md).
//! Exit codes: 0 ok; 1 transport or protocol failure; 2 usage or refused
//! locally; 3 the bridge answered with an AICC error; 4 the agent loop
//! did not reach its goal; 5 a replay found differences.
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

use aicc_agent::client::commands::{self, events_command, parse_input, Command};
use aicc_agent::client::manifest::LlmOffer;
use aicc_agent::client::retry::RetryPolicy;
use aicc_agent::client::transport::{self, TlsOptions};
use aicc_agent::client::{shell, ClientError, Session, SessionOptions};
use aicc_agent::mcp;

#[derive(Parser, Debug)]
#[command(
    version,
    about = "A command-line AICC agent: manifest, tools, calls, events, vision, and an interactive shell"
)]
struct Cli {
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    #[arg(long, default_value_t = 43010)]
    port: u16,
    /// Environment variable holding the agent's token (a token is never an
    /// argument; default AICC_TOKEN). Operator commands (`approvals`) read
    /// the operator's token from their own variable instead.
    #[arg(long, value_name = "VAR")]
    token_env: Option<String>,
    /// Speak TLS; the bridge's certificate must chain to --ca-file.
    #[arg(long)]
    tls: bool,
    #[arg(long, value_name = "PEM")]
    ca_file: Option<PathBuf>,
    /// Name the bridge's certificate must carry (default: --host).
    #[arg(long, value_name = "NAME")]
    server_name: Option<String>,
    /// Seconds for connecting, the handshake and each call's answer.
    #[arg(long, default_value_t = 30.0)]
    timeout_s: f64,
    /// Retries of a sensor call that failed with a retryable error (actuators never).
    #[arg(long, default_value_t = 0)]
    retries: u32,
    /// How long an event may wait for an older one to arrive, milliseconds.
    #[arg(long, default_value_t = 200)]
    reorder_window_ms: u64,
    #[command(subcommand)]
    command: Verb,
}

#[derive(Subcommand, Debug)]
enum Verb {
    /// The session manifest, pretty JSON.
    Manifest,
    /// The tools: id, class, capability, granted?, strict_input, limits.
    Tools,
    /// Call a tool; prints its output as JSON.
    Call {
        tool: String,
        /// The input, a JSON object (default {}).
        json: Option<String>,
    },
    /// Events as JSON lines, in tick order (late ones flagged "late": true).
    Events {
        #[arg(long)]
        count: Option<usize>,
        #[arg(long)]
        for_s: Option<f64>,
        /// Only these topics (subscribed to as well); repeatable.
        #[arg(long)]
        topic: Vec<String>,
    },
    /// Call vision and write the picture as a PNG file.
    Vision {
        #[arg(long, default_value = "frame.png")]
        out: PathBuf,
        json: Option<String>,
    },
    /// Operators' approvals (the operator's admin token, from
    /// --operator-token-env): list the calls waiting, approve or deny one,
    /// switch approval mode, hold or release the robot. Prints the bridge's
    /// answer as JSON. The bridge refuses a decision from the token of the
    /// agent whose call waits.
    Approvals {
        /// Environment variable holding the operator's token (never the agent's).
        #[arg(long, value_name = "VAR", default_value = "AICC_OPERATOR_TOKEN")]
        operator_token_env: String,
        #[command(subcommand)]
        action: ApprovalsVerb,
    },
    /// Interactive: history, completion of commands and tool names.
    Shell,
    /// An MCP server for MCP hosts, over stdio (default) or streamable HTTP;
    /// it is one AICC session on the bridge per MCP session.
    Mcp {
        /// Serve streamable HTTP at this address (path /mcp) instead of stdio.
        /// Loopback unless a bearer token is set (--http-token-env).
        #[arg(long, value_name = "ADDR:PORT")]
        http: Option<std::net::SocketAddr>,
        /// Environment variable holding the bearer token HTTP clients must
        /// send, on every address (loopback too: any local process could
        /// otherwise drive the robot and answer its approval prompts).
        #[arg(long, value_name = "VAR", default_value = "AICC_MCP_TOKEN")]
        http_token_env: String,
        /// Environment variable holding an operator's admin token: a call
        /// waiting for approval is then asked of the MCP host's user (MCP
        /// elicitation, where the host supports it), and their answer given
        /// on a session of its own with this token. Unset: never asked.
        #[arg(long, value_name = "VAR")]
        operator_token_env: Option<String>,
        /// Also offer the host's LLM the bridge's generators (a simulator's
        /// place_object). Operator tools (approve, deny, approval_mode,
        /// hold, record_start, record_stop) are never offered.
        #[arg(long)]
        offer_generators: bool,
    },
    /// Re-run a recording's tool calls and compare every result with the
    /// recorded one (docs/recording.md, "Replay"). Exit 0: no difference;
    /// 5: differences (listed); 2: the file was refused (named offset).
    Replay {
        /// The recording (an .mcap file the bridge wrote).
        file: PathBuf,
        /// Against the recording itself, served in-process: every field
        /// but the messages' addressing must be equal.
        #[arg(long, conflicts_with = "against")]
        check: bool,
        /// Against a live bridge at HOST:PORT: time, ticks and timing are
        /// not compared (see docs/recording.md), nor any --ignore key.
        #[arg(long, value_name = "HOST:PORT")]
        against: Option<String>,
        /// A key not to compare, wherever it appears; repeatable.
        #[arg(long, value_name = "KEY")]
        ignore: Vec<String>,
        /// Numbers differing by at most this are equal (--against only).
        #[arg(long, default_value_t = 0.0)]
        tolerance: f64,
        /// With --against: also re-send the recorded operator calls
        /// (approve, deny, approval_mode, hold, record_*), which are
        /// otherwise skipped and listed (they need an operator's token in
        /// --token-env, and decide things no replay should decide again).
        #[arg(long)]
        include_operator_calls: bool,
    },
    /// The agent loop: a backend decides, the loop calls the tools, until
    /// the goal, the budget or the timeout. Prints its report (JSON).
    /// Exit 0 when the goal was reached, 4 otherwise.
    Agent {
        /// reference (the scripted pick-the-red-cube policy), openai
        /// (AICC_LLM_BASE_URL, AICC_LLM_MODEL, AICC_LLM_API_KEY), or command.
        #[arg(long, default_value = "reference")]
        backend: String,
        /// For --backend command: the program and its arguments (after --).
        #[arg(last = true)]
        command: Vec<String>,
        #[arg(
            long,
            default_value = "Find the red cube, drive to it and pick it up with the gripper."
        )]
        goal: String,
        /// Requests the backend may make.
        #[arg(long, default_value_t = 200)]
        max_calls: u32,
        /// The whole run, seconds.
        #[arg(long, default_value_t = 300.0)]
        run_timeout_s: f64,
        /// One decision of the backend, seconds.
        #[arg(long, default_value_t = 60.0)]
        think_timeout_s: f64,
        /// Wake the backend after this long without calls or events, seconds.
        #[arg(long, default_value_t = 5.0)]
        timer_s: f64,
        /// Also write the report here.
        #[arg(long)]
        report: Option<PathBuf>,
        /// Also offer the backend the bridge's generators (a simulator's
        /// place_object). Operator tools are never offered.
        #[arg(long)]
        offer_generators: bool,
    },
}

#[derive(Subcommand, Debug)]
enum ApprovalsVerb {
    /// The calls waiting for an approval, oldest first.
    List,
    /// Approve a waiting call (its approval_id from `list`): it runs at once.
    Approve {
        approval_id: String,
        #[arg(long)]
        reason: Option<String>,
    },
    /// Deny a waiting call: it ends with an error and nothing moves.
    Deny {
        approval_id: String,
        #[arg(long)]
        reason: Option<String>,
    },
    /// Approval mode on or off: every actuator call but stop waits.
    Mode { on_off: String },
    /// The operator's hold on or off (as the console's STOP and Release):
    /// while on, every actuator call but stop waits for an operator.
    Hold { on_off: String },
}

/// The approval tool call an `approvals` command stands for.
fn approvals_command(action: &ApprovalsVerb) -> Result<Command, ClientError> {
    let decide = |tool: &str, approval_id: &str, reason: &Option<String>| {
        let mut input = serde_json::json!({ "approval_id": approval_id });
        if let Some(reason) = reason {
            input["reason"] = serde_json::json!(reason);
        }
        Command::Call { tool: tool.into(), input }
    };
    Ok(match action {
        ApprovalsVerb::List => {
            Command::Call { tool: "approvals_list".into(), input: serde_json::json!({}) }
        }
        ApprovalsVerb::Approve { approval_id, reason } => decide("approve", approval_id, reason),
        ApprovalsVerb::Deny { approval_id, reason } => decide("deny", approval_id, reason),
        ApprovalsVerb::Mode { on_off } | ApprovalsVerb::Hold { on_off } => {
            let (verb, tool) = if matches!(action, ApprovalsVerb::Mode { .. }) {
                ("mode", "approval_mode")
            } else {
                ("hold", "hold")
            };
            let on = match on_off.as_str() {
                "on" => true,
                "off" => false,
                other => {
                    return Err(ClientError::Usage(format!(
                        "approvals {verb} takes on or off, got '{other}'"
                    )))
                }
            };
            Command::Call { tool: tool.into(), input: serde_json::json!({ "on": on }) }
        }
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            return fail(&ClientError::Transport(format!("cannot start the runtime: {error}")))
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(&error),
    }
}

fn fail(error: &ClientError) -> ExitCode {
    match error {
        ClientError::Remote(remote) => eprintln!("{remote}"),
        other => eprintln!("aicc: {other}"),
    }
    ExitCode::from(error.exit_code())
}

async fn run(cli: Cli) -> Result<(), ClientError> {
    let command = match &cli.command {
        Verb::Manifest => Some(Command::Manifest),
        Verb::Tools => Some(Command::Tools),
        Verb::Call { tool, json } => {
            Some(Command::Call { tool: tool.clone(), input: parse_input(tool, json.as_deref())? })
        }
        Verb::Events { count, for_s, topic } => {
            Some(events_command(*count, *for_s, topic.clone())?)
        }
        Verb::Vision { out, json } => Some(Command::Vision {
            out: out.clone(),
            input: parse_input("vision", json.as_deref())?,
        }),
        Verb::Approvals { action, .. } => Some(approvals_command(action)?),
        Verb::Shell | Verb::Mcp { .. } | Verb::Agent { .. } | Verb::Replay { .. } => None,
    };
    let mut options = session_options(&cli)?;
    let tls = tls_options(&cli)?;
    if let Verb::Mcp { http, http_token_env, operator_token_env, offer_generators } = &cli.command {
        let operator_token =
            operator_token(operator_token_env.as_deref(), |name| std::env::var(name).ok())?;
        if operator_token.is_some() && operator_token == options.token {
            return Err(ClientError::Usage(format!("--operator-token-env {}: it holds the same token as the agent's ({}): the agent would be its own operator. Give the operator a token of its own", operator_token_env.as_deref().unwrap_or(""), cli.token_env.as_deref().unwrap_or("AICC_TOKEN"))));
        }
        let offer = LlmOffer { generators: *offer_generators };
        return serve_mcp(&cli, options, tls, *http, http_token_env, operator_token, offer).await;
    }
    if let Verb::Replay { file, check, against, ignore, tolerance, include_operator_calls } =
        &cli.command
    {
        return replay(
            file,
            *check,
            against.as_deref(),
            ignore,
            *tolerance,
            *include_operator_calls,
            options,
            tls.as_ref(),
        )
        .await;
    }
    if let Verb::Approvals { operator_token_env, .. } = &cli.command {
        // The operator's token, never the agent's.
        options.token = operator_token(Some(operator_token_env), |name| std::env::var(name).ok())?;
    }
    let stream = transport::connect(&cli.host, cli.port, tls.as_ref(), options.timeout).await?;
    let mut session = Session::open(stream, options).await?;
    if let Verb::Agent {
        backend,
        command,
        goal,
        max_calls,
        run_timeout_s,
        think_timeout_s,
        timer_s,
        report,
        offer_generators,
    } = &cli.command
    {
        let offer = LlmOffer { generators: *offer_generators };
        return run_agent(
            session,
            backend,
            command,
            goal,
            *max_calls,
            [*run_timeout_s, *think_timeout_s, *timer_s],
            report.as_deref(),
            offer,
        )
        .await;
    }
    let Some(command) = command else { return shell::run_shell(session).await };
    let mut stdout = std::io::stdout();
    let outcome = commands::run(&mut session, &command, &mut stdout, &mut |warning| {
        eprintln!("aicc: warning: {warning}")
    })
    .await;
    // A session that broke the protocol or the connection is not closed politely.
    if matches!(
        outcome,
        Ok(()) | Err(ClientError::Remote(_) | ClientError::Refused(_) | ClientError::Usage(_))
    ) {
        let _ = session.close().await;
    }
    outcome
}

#[allow(clippy::too_many_arguments)]
async fn run_agent(
    session: Session,
    backend: &str,
    command: &[String],
    goal: &str,
    max_calls: u32,
    seconds: [f64; 3],
    report_file: Option<&std::path::Path>,
    offer: LlmOffer,
) -> Result<(), ClientError> {
    use aicc_agent::agent::{self, Backend};
    for (name, value) in ["--run-timeout-s", "--think-timeout-s", "--timer-s"].iter().zip(seconds) {
        if !(value.is_finite() && value > 0.0 && value <= 86_400.0) {
            return Err(ClientError::Usage(format!(
                "{name} must be a positive number of seconds (at most a day), got {value}"
            )));
        }
    }
    let [run_timeout_s, think_timeout_s, timer_s] = seconds;
    let limits = agent::Limits {
        max_calls,
        timeout: Duration::from_secs_f64(run_timeout_s),
        think_timeout: Duration::from_secs_f64(think_timeout_s),
        timer: Duration::from_secs_f64(timer_s),
        ..agent::Limits::default()
    };
    let mut backend: Box<dyn Backend> = match backend {
        "reference" => Box::new(agent::script::ScriptBackend::start(
            "reference pick policy",
            agent::reference::pick_red_cube,
        )),
        "openai" => {
            let endpoint = agent::openai::Endpoint::from_env().map_err(ClientError::Usage)?;
            Box::new(agent::openai::OpenAiBackend::new(
                endpoint,
                goal,
                Duration::from_secs_f64(think_timeout_s),
            ))
        }
        "command" => Box::new(
            agent::command::CommandBackend::spawn(command, goal).map_err(ClientError::Usage)?,
        ),
        other => {
            return Err(ClientError::Usage(format!(
                "--backend must be reference, openai or command, got '{other}'"
            )))
        }
    };
    let mut link = agent::link::SessionLink::new(session, offer);
    let report = agent::run(&mut link, backend.as_mut(), limits).await;
    let text = serde_json::to_string_pretty(&report.to_json()).unwrap_or_default();
    println!("{text}");
    if let Some(path) = report_file {
        std::fs::write(path, format!("{text}\n"))
            .map_err(|e| ClientError::Usage(format!("--report {}: {e}", path.display())))?;
    }
    let _ = link.session.close().await;
    if report.ending == agent::Ending::Goal {
        Ok(())
    } else {
        std::process::exit(4)
    }
}

/// `aicc replay`: the recorded calls against the recording itself
/// (`--check`, served in-process on a loopback port) or a live bridge.
#[allow(clippy::too_many_arguments)]
async fn replay(
    file: &std::path::Path,
    check: bool,
    against: Option<&str>,
    ignore: &[String],
    tolerance: f64,
    include_operator_calls: bool,
    options: SessionOptions,
    tls: Option<&TlsOptions>,
) -> Result<(), ClientError> {
    use aicc_agent::replay::{self, compare::Rules};
    if !(tolerance.is_finite() && tolerance >= 0.0) {
        return Err(ClientError::Usage(format!(
            "--tolerance must be a number of at least 0, got {tolerance}"
        )));
    }
    let book = aicc_wire::recording::load(file).map_err(ClientError::Usage)?;
    let calls = book.calls.clone();
    let (stream, rules, token) = match (check, against) {
        (true, _) => {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| {
                ClientError::Transport(format!("cannot listen on a loopback port: {e}"))
            })?;
            let port =
                listener.local_addr().map_err(|e| ClientError::Transport(e.to_string()))?.port();
            tokio::spawn(aicc_wire::recording::serve::serve(
                listener,
                std::sync::Arc::new(std::sync::Mutex::new(book)),
                Default::default(),
            ));
            let mut rules = Rules::exact();
            rules.ignored.extend(ignore.iter().cloned());
            (transport::connect("127.0.0.1", port, None, options.timeout).await?, rules, None)
        }
        (false, Some(address)) => {
            let (host, port) = address
                .rsplit_once(':')
                .and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?)))
                .ok_or_else(|| {
                    ClientError::Usage(format!("--against {address}: expected HOST:PORT"))
                })?;
            (
                transport::connect(host, port, tls, options.timeout).await?,
                Rules::live(ignore, tolerance),
                options.token.clone(),
            )
        }
        (false, None) => {
            return Err(ClientError::Usage(
                "aicc replay needs --check or --against HOST:PORT".into(),
            ))
        }
    };
    // A live bridge is not asked to decide again what an operator decided
    // in the recording (approvals, approval mode, the hold, recording).
    let skip_operator_calls = against.is_some() && !include_operator_calls;
    let report =
        replay::run(&calls, stream, token.as_deref(), &rules, options.timeout, skip_operator_calls)
            .await?;
    print!("{}", report.text());
    if report.is_clean() {
        Ok(())
    } else {
        std::process::exit(5)
    }
}

fn tls_options(cli: &Cli) -> Result<Option<TlsOptions>, ClientError> {
    match (cli.tls, &cli.ca_file) {
        (true, Some(ca_file)) => Ok(Some(TlsOptions { ca_file: ca_file.clone(), server_name: cli.server_name.clone() })),
        (true, None) => Err(ClientError::Usage("--tls needs --ca-file PEM (the certificate authority to trust; no system store is used)".into())),
        (false, _) if cli.ca_file.is_some() || cli.server_name.is_some() => Err(ClientError::Usage("--ca-file and --server-name need --tls".into())),
        (false, _) => Ok(None),
    }
}

/// `aicc mcp`: stdout is the MCP channel, so logs go to stderr
/// (`AICC_LOG=debug` for more).
async fn serve_mcp(
    cli: &Cli,
    session: SessionOptions,
    tls: Option<TlsOptions>,
    http: Option<std::net::SocketAddr>,
    http_token_env: &str,
    operator_token: Option<String>,
    offer: LlmOffer,
) -> Result<(), ClientError> {
    let filter = tracing_subscriber::EnvFilter::try_from_env("AICC_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,rmcp=warn"));
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(filter)
        .try_init();
    let operator = operator_token.map(|token| mcp::OperatorTarget {
        host: cli.host.clone(),
        port: cli.port,
        tls: tls.clone(),
        session: SessionOptions {
            token: Some(token),
            subscribe: Some(Vec::new()),
            ..session.clone()
        },
    });
    let bridge =
        mcp::BridgeTarget { host: cli.host.clone(), port: cli.port, tls, session, operator, offer };
    let Some(address) = http else {
        return mcp::serve_stdio(bridge)
            .await
            .map_err(|e| ClientError::Transport(format!("mcp: {e}")));
    };
    let token =
        mcp::http::required_token(address, http_token_env, std::env::var(http_token_env).ok())
            .map_err(|refusal| ClientError::Usage(refusal.to_string()))?;
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|e| ClientError::Usage(format!("--http {address}: cannot listen: {e}")))?;
    let shutdown = tokio_util::sync::CancellationToken::new();
    let on_signal = shutdown.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        on_signal.cancel();
    });
    mcp::http::serve(listener, bridge, token, shutdown)
        .await
        .map_err(|e| ClientError::Transport(format!("mcp over HTTP: {e}")))
}

/// The operator's token from its variable: that variable must hold one (a
/// mistyped name must not silently turn the asking off, nor an operator
/// command run with the agent's token).
fn operator_token(
    token_env: Option<&str>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Option<String>, ClientError> {
    let Some(name) = token_env else { return Ok(None) };
    match env(name) {
        Some(token) if !token.is_empty() => Ok(Some(token)),
        Some(_) => Err(ClientError::Usage(format!("--operator-token-env {name}: the variable is empty; it must hold an operator's admin token"))),
        None => Err(ClientError::Usage(format!("--operator-token-env {name}: the variable is not set; it must hold an operator's admin token (the agent's token, AICC_TOKEN, decides nothing)"))),
    }
}

fn session_options(cli: &Cli) -> Result<SessionOptions, ClientError> {
    if !(cli.timeout_s.is_finite() && cli.timeout_s > 0.0 && cli.timeout_s <= 86_400.0) {
        return Err(ClientError::Usage(format!(
            "--timeout-s must be a positive number of seconds (at most a day), got {}",
            cli.timeout_s
        )));
    }
    if cli.reorder_window_ms > 10_000 {
        return Err(ClientError::Usage(format!(
            "--reorder-window-ms {} is more than 10000",
            cli.reorder_window_ms
        )));
    }
    let token_env = cli.token_env.as_deref().unwrap_or("AICC_TOKEN");
    let token = match std::env::var(token_env) {
        Ok(token) if !token.is_empty() => Some(token),
        Ok(_) => {
            eprintln!("aicc: warning: {token_env} is empty: connecting without a token");
            None
        }
        Err(_) => {
            if cli.token_env.is_some() {
                eprintln!("aicc: warning: {token_env} is not set: connecting without a token");
            }
            None
        }
    };
    let subscribe = match &cli.command {
        Verb::Events { topic, .. } if !topic.is_empty() => Some(topic.clone()),
        _ => None,
    };
    Ok(SessionOptions {
        token,
        timeout: Duration::from_secs_f64(cli.timeout_s),
        subscribe,
        reorder_window: Duration::from_millis(cli.reorder_window_ms),
        retry: RetryPolicy::new(cli.retries)
            .map_err(|too_many| ClientError::Usage(too_many.to_string()))?,
        ..SessionOptions::default()
    })
}
