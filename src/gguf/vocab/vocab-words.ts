/**
 * Word lists the built-in tokenizer's vocabulary is trained from (see vocab.ts). Roughly in order of
 * decreasing frequency within each list; duplicates are harmless (they are merged). Written for this
 * project: common English, the vocabulary of agent / tool-use conversations, and code.
 */

export const ENGLISH_WORDS = `
the of and to a in is it you that he was for on are with as i his they be at one have this from or
had by not word but what some we can out other were all there when up use your how said an each she
which do their time if will way about many then them write would like so these her long make thing see
him two has look more day could go come did number sound no most people my over know water than call
first who may down side been now find any new work part take get place made live where after back little
only round man year came show every good me give our under name very through just form sentence great
think say help low line differ turn cause much mean before move right boy old too same tell does set three
want air well also play small end put home read hand port large spell add even land here must big high such
follow act why ask men change went light kind off need house picture try us again animal point mother world
near build self earth father head stand own page should country found answer school grow study still learn
plant cover food sun four between state keep eye never last let thought city tree cross farm hard start might
story saw far sea draw left late run don't while press close night real life few north open seem together next
white children begin got walk example ease paper group always music those both mark often letter until mile
river car feet care second book carry took science eat room friend began idea fish mountain stop once base
hear horse cut sure watch color face wood main enough plain girl usual young ready above ever red list though
feel talk bird soon body dog family direct pose leave song measure door product black short numeral class wind
question happen complete ship area half rock order fire south problem piece told knew pass since top whole king
space heard best hour better true during hundred five remember step early hold west ground interest reach fast
verb sing listen six table travel less morning ten simple several vowel toward war lay against pattern slow
center love person money serve appear road map rain rule govern pull cold notice voice unit power town fine
certain fly fall lead cry dark machine note wait plan figure star box noun field rest correct able pound done
beauty drive stood contain front teach week final gave green oh quick develop ocean warm free minute strong
special mind behind clear tail produce fact street inch multiply nothing course stay wheel full force blue
object decide surface deep moon island foot system busy test record boat common gold possible plane stead dry
wonder laugh thousand ago ran check game shape equate hot miss brought heat snow tire bring yes distant fill
east paint language among grand ball yet wave drop heart am present heavy dance engine position arm wide sail
material size vary settle speak weight general ice matter circle pair include divide syllable felt perhaps
pick sudden count square reason length represent art subject region energy hunt probable bed brother egg ride
cell believe fraction forest sit race window store summer train sleep prove lone leg exercise wall catch mount
wish sky board joy winter sat written wild instrument kept glass grass cow job edge sign visit past soft fun
bright gas weather month million bear finish happy hope flower clothe strange gone jump baby eight village meet
root buy raise solve metal whether push seven paragraph third shall held hair describe cook floor either result
burn hill safe cat century consider type law bit coast copy phrase silent tall sand soil roll temperature finger
industry value fight lie beat excite natural view sense ear else quite broke case middle kill son lake moment
scale loud spring observe child straight consonant nation dictionary milk speed method organ pay age section
dress cloud surprise quiet stone tiny climb cool design poor lot experiment bottom key iron single stick flat
twenty skin smile crease hole trade melody trip office receive row mouth exact symbol die least trouble shout
except wrote seed tone join suggest clean break lady yard rise bad blow oil blood touch grew cent mix team wire
cost lost brown wear garden equal sent choose fell fit flow fair bank collect save control decimal gentle woman
captain practice separate difficult doctor please protect noon whose locate ring character insect caught period
indicate radio spoke atom human history effect electric expect crop modern element hit student corner party
supply bone rail imagine provide agree thus capital won't chair danger fruit rich thick soldier process operate
guess necessary sharp wing create neighbor wash bat rather crowd corn compare poem string bell depend meat rub
tube famous dollar stream fear sight thin triangle planet hurry chief colony clock mine tie enter major fresh
search send yellow gun allow print dead spot desert suit current lift rose continue block chart hat sell success
company subtract event particular deal swim term opposite wife shoe shoulder spread arrange camp invent cotton
born determine quart nine truck noise level chance gather shop stretch throw shine property column molecule
select wrong gray repeat require broad prepare salt nose plural anger claim continent oxygen sugar death pretty
skill women season solution magnet silver thank branch match suffix especially fig afraid huge sister steel
discuss forward similar guide experience score apple bought led pitch coat mass card band rope slip win dream
evening condition feed tool total basic smell valley nor double seat arrive master track parent shore division
sheet substance favor connect post spend chord fat glad original share station dad bread charge proper bar offer
segment slave duck instant market degree populate chick dear enemy reply drink occur support speech nature range
steam motion path liquid log meant quotient teeth shell neck is was are were been being has have had do does did
done doing can could shall should will would may might must this that these those there here where when why how
what which who whom whose it its it's i'm you're we're they're i've you've we've i'll you'll we'll isn't aren't
wasn't weren't hasn't haven't didn't doesn't can't couldn't shouldn't wouldn't let's that's there's here's
what's who's into onto upon within without about above across after against along among around because before
behind below beneath beside besides beyond despite down during except inside near outside over past per since
through throughout till toward towards under underneath unlike until via whereas whether while also however
therefore moreover furthermore although though unless otherwise instead meanwhile indeed actually probably
really already almost always usually often sometimes never perhaps maybe quite rather very too just only even
still yet else soon later now today tomorrow yesterday ago again once twice first second third last next
previous following above below new old good bad best worst better worse more most less least many much few
several enough each every either neither both all any some none another other others such same different
important possible available similar specific simple complex general common certain clear whole main major
small large big little high low long short early late recent current final full empty free open closed public
private local global real true false easy hard able unable likely unlikely sure whole entire basic additional
key single multiple various useful correct incorrect valid invalid known unknown necessary relevant related
own own way thing things people person time times year years day days week weeks month months hour hours minute
minutes second seconds part parts place places case cases point points group groups number numbers problem
problems fact facts hand hands eye eyes world life area areas company system systems program programs question
questions government home room rooms story stories job jobs word words business issue issues side kind head
house service services friend friends power country money moment level levels change changes order orders
process information data idea ideas team teams result results reason reasons research community name names
understand understanding understood provide provided providing include included including includes continue
continued become became becoming begin began begun seem seemed show showed shown showing feel felt try tried
trying leave left call called calling keep kept start started starting need needed needs help helped helping
make makes making made take takes taking took taken give gives giving gave given know knows knowing knew known
think thinks thinking thought see sees seeing saw seen come comes coming came want wants wanted wanting look
looks looked looking use uses used using find finds finding found tell tells telling told ask asks asked asking
work works worked working seem seems turn turns turned turning run runs running move moves moved moving live
lives lived living believe believed hold holds holding bring brings bringing brought happen happened happens
write writes writing wrote written sit stand lose lost pay paid meet met include set sets learn learned
learning lead leads leading led understand watch follow follows followed following stop stopped create created
creating creates speak spoke read reading allow allowed allows add added adding spend spent grow grew growth
open opened opening walk win offer offered remember remembered love consider considered appear appeared buy
wait waiting serve die send sent expect expected build built building stay fall cut reach kill remain remains
suggest suggested raise pass sell require required requires requiring report reported decide decided pull
explain explained explaining describe described update updated updating check checked checking fix fixed fixing
`;

/** Words of tool-using agent conversations, software work and the web. */
export const TECH_WORDS = `
user assistant system tool tools call calls function functions argument arguments parameter parameters param
params result results response responses request requests message messages content role name query search
file files path paths directory directories folder folders read write append delete remove create update
list lists get set put post patch fetch send receive return returns returned value values key keys type types
string strings number integer float boolean bool array arrays object objects map maps dictionary list tuple
null undefined none true false error errors warning warnings exception exceptions fail failed failure success
successful status code codes output input inputs outputs log logs logging debug info trace stack server client
api apis endpoint endpoints url urls http https json yaml xml html css csv text markdown document documents
documentation docs example examples test tests testing unit integration run running build builds compile
compiled compiler install installed package packages module modules import imports export exports library
libraries dependency dependencies version versions release config configuration settings option options
default defaults environment variable variables command commands terminal shell script scripts bash python
javascript typescript java rust node npm git commit commits branch branches merge pull push repository repo
issue issues bug bugs feature features change changes diff patch review line lines column columns row rows
table tables database databases sql select insert from where join index indexes schema model models token
tokens context prompt prompts cache caching memory time timeout latency throughput request queue scheduler
schedule batch batches session sessions turn turns agent agents task tasks step steps plan plans goal goals
action actions observation observations thought thoughts reasoning answer answers summary summarize analyze
analysis implement implementation method methods class classes interface interfaces instance instances
property properties field fields attribute attributes event events handler handlers callback callbacks
promise promises async await sync thread threads process processes worker workers job jobs service services
network connection connections socket port host address email password user users account accounts login
logout auth authentication authorization permission permissions access admin image images video audio
upload download link links page pages website web browser click button form forms window screen view views
component components state props render template templates style styles layout element elements node nodes
tree trees graph graphs edge edges vertex matrix vector vectors tensor tensors weight weights layer layers
train training inference predict prediction accuracy loss score scores metric metrics benchmark dataset
datasets sample samples random seed size sizes length width height count total sum average mean max min
minimum maximum limit limits range ranges offset start end begin first last next previous current new old
temperature weather forecast city cities location date dates today calendar meeting meetings schedule price
prices order orders product products customer customers payment invoice cart shipping stock market report
reports chart charts spreadsheet sheet cell cells formula slide slides presentation note notes reminder
contact contacts phone number address calculate calculator convert conversion currency translate translation
language languages weather news article articles source sources reference references citation link please
thanks thank sorry okay sure let me here is the following based on looks like seems according information
found note however also let's check first then next finally done complete completed working works error
`;

/** Keywords, builtins and identifier parts of common programming languages. */
export const CODE_WORDS = `
const let var function return if else for while do switch case break continue default try catch finally throw
new this class extends implements interface type enum import export from as async await yield static public
private protected readonly abstract void null undefined true false typeof instanceof in of delete super
constructor get set def self lambda pass raise except elif with assert global nonlocal None True False and or
not is print len range str int float dict list tuple bool isinstance open append extend items keys values
format join split strip replace lower upper startswith endswith enumerate zip sorted reversed sum min max abs
fn mut pub struct impl trait use mod crate match loop where unsafe Box Vec String Option Some Ok Err Result
func package go defer chan select make map interface nil err fmt Println Printf Sprintf errors
include define ifndef endif int char long short unsigned signed double sizeof struct typedef static extern
inline std vector string cout endl printf malloc free
console log warn error info debug JSON parse stringify Object keys values entries assign freeze Array isArray
from map filter reduce forEach find findIndex some every includes indexOf push pop shift unshift slice splice
concat sort reverse length Math floor ceil round random sqrt pow PI Date now toString toFixed parseInt
parseFloat Number String Boolean Symbol Promise resolve reject then all race Error TypeError Map Set WeakMap
require module exports process env argv exit stdout stderr write read readFile writeFile fs path join resolve
dirname basename existsSync mkdir readdir http createServer listen req res send status json headers body query
params method url express app router use next middleware fetch response ok text
self init __init__ __name__ __main__ main args kwargs return cls np pd plt df torch nn tensor cuda device
data value values item items index idx key keys result results count total size length name names id ids
user users config options opts props state ctx context req res err error msg message messages text content
input output buf buffer line lines file files path dir src dst tmp temp val obj arr list map set fn cb callback
handler handle handles event events node nodes child children parent root left right start end begin first last
prev next curr current temp new old min max sum avg mean num str len width height offset pos position row col
x y z i j k n m a b c d e f g h p q r s t u v w
get set is has can should add remove update delete create load save fetch parse format render build run init
reset clear close open send write read start stop check validate compute process apply convert handle
Get Set Is Has Add Remove Update Delete Create Load Save Fetch Parse Format Render Build Run Init Reset Clear
Close Open Send Write Read Start Stop Check Validate Compute Process Apply Convert Handle
Name Id Type Value Data List Map Set Item Items Index Key Count Size Length Error Result Config Options
State Context Request Response Message Event Handler Manager Service Client Server Factory Builder Provider
Controller Model View Component Node Tree Graph Cache Queue Stack Buffer Stream Reader Writer Parser Token
Tokenizer Engine Session Agent Tool Call Task Job Worker Pool Thread Lock Timer Clock Policy Scheduler Metrics
User File Path Text String Number Object Array Function Promise Async Sync Test Spec Mock Util Utils Helper
test tests describe it expect assert equal deepEqual strictEqual toBe toEqual toHaveBeenCalled beforeEach
afterEach mock spy stub fixture setup teardown
README TODO FIXME NOTE http https www com org io github npm localhost api v1 v2 src lib dist bin docs
`;

/**
 * Non-letter pieces (each a whole pre-token) with a relative weight; "▁" stands for a space.
 * SentencePiece-style pieces never mix letters with punctuation, so these are kept apart.
 */
export const SYMBOL_PIECES: readonly [string, number][] = [
  [".", 60],
  [",", 60],
  ["▁(", 12],
  ["(", 14],
  [")", 14],
  [").", 5],
  ["),", 5],
  [");", 8],
  ["()", 8],
  ["();", 6],
  ["()", 6],
  ["():", 3],
  ["())", 2],
  ["▁{", 10],
  ["{", 6],
  ["}", 8],
  ["▁}", 6],
  ["});", 3],
  ["},", 4],
  ["▁[", 4],
  ["[", 6],
  ["]", 6],
  ["],", 3],
  ["[]", 3],
  ["][", 2],
  ["]:", 1],
  ["])", 2],
  ["▁=", 14],
  ["▁==", 3],
  ["▁===", 4],
  ["▁!=", 2],
  ["▁!==", 2],
  ["▁=>", 6],
  ["▁->", 2],
  ["::", 2],
  ["▁+", 3],
  ["▁-", 6],
  ["▁*", 2],
  ["▁/", 2],
  ["▁%", 1],
  ["▁<", 2],
  ["▁>", 2],
  ["▁<=", 1],
  ["▁>=", 1],
  ["▁+=", 2],
  ["▁-=", 1],
  ["▁&&", 2],
  ["▁||", 2],
  ["▁?", 1],
  ["▁??", 1],
  ["▁|", 1],
  ["▁&", 1],
  ["++", 1],
  ["--", 1],
  ["▁--", 1],
  ["=", 4],
  ["==", 1],
  [":", 20],
  ["▁:", 1],
  [";", 10],
  ["'", 10],
  ["▁'", 6],
  ["',", 3],
  ["')", 2],
  ['"', 14],
  ['▁"', 10],
  ['",', 6],
  ['":', 6],
  ['")', 2],
  ['"]', 1],
  ["`", 4],
  ["▁`", 3],
  ["```", 2],
  ["`,", 1],
  ["`.", 1],
  ["?", 8],
  ["!", 6],
  ["...", 3],
  ["▁-", 3],
  ["-", 8],
  ["_", 8],
  ["__", 2],
  ["/", 6],
  ["//", 3],
  ["▁//", 4],
  ["://", 2],
  ["./", 2],
  ["../", 1],
  ["▁#", 3],
  ["#", 2],
  ["##", 1],
  ["###", 1],
  ["▁*", 2],
  ["**", 2],
  ["▁**", 1],
  ["*/", 1],
  ["▁/*", 1],
  ["▁<", 1],
  ["</", 2],
  ["/>", 1],
  [">", 3],
  ["<", 2],
  ["▁@", 1],
  ["@", 1],
  ["$", 1],
  ["▁$", 1],
  ["${", 1],
  ["%", 2],
  ["&", 1],
  ["|", 1],
  ["\\", 1],
  ["~", 1],
  ["^", 1],
  ["▁▁", 12],
  ["▁▁▁", 4],
  ["▁▁▁▁", 10],
  ["▁▁▁▁▁▁", 3],
  ["▁▁▁▁▁▁▁▁", 6],
  ["▁▁▁▁▁▁▁▁▁▁▁▁", 3],
  ["▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁▁", 2],
  ["\t", 2],
  ["\t\t", 1],
];
