/**
 * The fixed word list synthetic replay conversations are drawn from: plain English and the vocabulary
 * of agent transcripts (shell, Python, diffs). Changing it changes every replayed prompt, so it is
 * frozen; replays with the same seed send byte-identical new content.
 */
const TEXT = `
the a an of to in and is it that for on with as this be are was by from at or not have has
can will should would could may must if then else when while each every some any all no more
most other such only also just than into over under after before between through about again
file files line lines function class method value values result results error errors test tests
module package import export return print string number list dict object type name path paths
directory folder repository branch commit change changes diff patch fix bug issue output input
command run runs running check checks call calls argument arguments option options config setting
read write open close load save create delete update remove add replace insert find search match
first last next previous new old current default expected actual missing invalid empty found
data cache memory time request response server client model token tokens batch step steps turn
agent tool tools task plan think look see try use make get set show list view edit keep need
source code source_code utils helpers core main index setup build install version release docs
self cls args kwargs none true false def async await yield raise except finally lambda assert
parser lexer node tree graph queue stack buffer stream reader writer handler worker thread lock
user admin account session query table column row field record schema migration database index
case cases example examples sample samples input_file output_file config_path base_dir tmp
red green blue small large short long fast slow simple complex clear quick careful correct wrong
because however therefore instead otherwise although unless until since where which what who how
test_parser test_utils test_models conftest setup_method tear_down fixture mock patch monkeypatch
assertEqual assertTrue assertRaises isinstance getattr setattr hasattr len range enumerate zip
numpy pandas django flask requests pytest sympy astropy matplotlib scikit sphinx xarray pylint
traceback exception warning deprecated attribute property decorator instance subclass interface
`;

export const REPLAY_WORDS: readonly string[] = Object.freeze(TEXT.split(/\s+/).filter((w) => w.length > 0));
